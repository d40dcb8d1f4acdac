#!/bin/sh
# The socket backend where io_uring is refused: tests/zerocopy-refused.c
# (a seccomp filter like Docker's, then kernel.io_uring_disabled=2 as
# root).  A script so that Makefile.am can run it after the io_uring
# tests: it sets a sysctl of the whole machine for a moment.
exec "${top_builddir:-.}/tests/zerocopy-refused"
