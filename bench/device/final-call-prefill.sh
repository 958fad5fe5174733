#!/usr/bin/env bash
# Issue 35's prefill table in one call (2026-11-29, one H200): the gallery at
# prefill through the backend (final-call-gallery.sh with SIZE=prefill).
# Run from the repository root after `bash scripts/gpu-test.sh --pack`.
SIZE=prefill OUT=${OUT:-$PWD/gpu-results/final-prefill} \
  exec bash "$(dirname "$0")/final-call-gallery.sh"
