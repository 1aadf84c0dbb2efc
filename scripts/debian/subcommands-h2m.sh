#!/bin/sh
# Prints a help2man include section (debian/rules) with each subcommand's own --help, as
# `pgjobd --help` lists them, verbatim in a no-fill block. pgjobd must be on PATH.
set -eu
printf '[SUBCOMMANDS]\n'
pgjobd --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }' |
  while read -r sub; do
    printf '.SS "pgjobd %s"\n.nf\n' "$sub"
    # roff: a backslash is \e; a line starting with . or ' would be a request.
    pgjobd "$sub" --help | sed -e 's/\\/\\e/g' -e "s/^[.']/\\\\\\&&/"
    printf '.fi\n'
  done
