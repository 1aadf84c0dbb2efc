# The engine library depends on nothing above it: no file of the engine (every file under
# src/ outside the application's directories, but src/main.cpp) includes a header of those
# directories. Run by CMakeLists.txt at configure time and by ctest (engine_includes) after
# an edit, as `cmake -DPGJOBD_SOURCE_DIR=<tree> "-DPGJOBD_ABOVE_ENGINE=src/cli|src/ui|..."
# -P check_engine_includes.cmake`; fails naming each such file and its #include line.
if(NOT PGJOBD_SOURCE_DIR OR NOT PGJOBD_ABOVE_ENGINE)
  message(FATAL_ERROR "check_engine_includes.cmake: set PGJOBD_SOURCE_DIR and PGJOBD_ABOVE_ENGINE")
endif()
string(REPLACE ";" "|" above "${PGJOBD_ABOVE_ENGINE}")
string(REPLACE "src/" "" included "${above}")  # headers are included relative to src/
file(GLOB_RECURSE engine_files RELATIVE ${PGJOBD_SOURCE_DIR}
  ${PGJOBD_SOURCE_DIR}/src/*.cpp ${PGJOBD_SOURCE_DIR}/src/*.hpp ${PGJOBD_SOURCE_DIR}/src/*.in)
list(FILTER engine_files EXCLUDE REGEX "^(${above})/|^src/main[.]cpp$")
set(found "")
foreach(engine_file ${engine_files})
  file(STRINGS ${PGJOBD_SOURCE_DIR}/${engine_file} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${lines})
    if(line MATCHES "#[ \t]*include[ \t]*[\"<](${included})/")
      string(APPEND found "\n  ${engine_file}: ${line}")
    endif()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "The engine (pgjobd_engine) includes headers of the application "
                      "(${above}):${found}")
endif()
