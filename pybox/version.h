/* SPDX-License-Identifier: MIT */
/* PyBox's version. */
#ifndef PYBOX_VERSION_H
#define PYBOX_VERSION_H
#define PYBOX_VERSION "0.1.0"
#endif
