#!/usr/bin/env bash
# The Multi30k recipe, kept under its old name: scripts/multi30k.py, whose
# opening comment gives the arguments and the environment.
#   scripts/multi30k.sh [DATA_DIR] [PAIR] [FORM]
exec python3 "$(dirname "$0")/multi30k.py" "$@"
