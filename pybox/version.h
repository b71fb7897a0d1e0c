/* SPDX-License-Identifier: MIT */
/* PyBox's version. */
#ifndef PYBOX_VERSION_H
#define PYBOX_VERSION_H
#define PYBOX_VERSION "0.1.0"
/* What PyBox says of itself (--version, receipts): the version, and a test build's mark:
 * the build whose cgroup v2 reader is wrong on purpose (Makefile BROKEN=v2-reader). */
#ifdef PYBOX_TEST_BROKEN_V2_READER
#define PYBOX_VERSION_SAID PYBOX_VERSION "+test-build-broken-v2-reader"
#else
#define PYBOX_VERSION_SAID PYBOX_VERSION
#endif
#endif
