/* SPDX-License-Identifier: MIT */
/* The command line's help: every command and option, with its default and its ceiling. */
#ifndef PYBOX_CLI_HELP_H
#define PYBOX_CLI_HELP_H

#include <stdio.h>

/* The help of one command ("exec", "mcp", "image", "cleanup", "verify", "key"), or of pybox (NULL or ""):
 * 0, or -1 when there is no such command. */
int pybox_help(FILE *out, const char *command);

#endif
