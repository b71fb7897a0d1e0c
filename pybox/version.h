/* SPDX-License-Identifier: MIT */
/* PyBox's version. */
#ifndef PYBOX_VERSION_H
#define PYBOX_VERSION_H
#ifdef PYBOX_TEST_BROKEN_V2_READER
/* The test build whose cgroup v2 reader is wrong on purpose (Makefile BROKEN=v2-reader). */
#define PYBOX_VERSION "0.1.0+test-build-broken-v2-reader"
#else
#define PYBOX_VERSION "0.1.0"
#endif
#endif
