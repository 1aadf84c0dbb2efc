// pgjobd's entry point: everything lives in the core library; main only hands over.

#include "cli/commands.hpp"

int main(int argc, char** argv) { return pgjobd::cli_main(argc, argv); }
