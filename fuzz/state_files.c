/* SPDX-License-Identifier: MIT */
/* Fuzz target: the installation's state files as PyBox reads them. The first byte picks
 * the file: 0 config.json (the ceilings and the backend), 1 images.json (the image
 * pins), 2 a run note (runs/<run>.json). The rest is the file. A ceiling taken is
 * positive and within its bound; a pin's strings are terminated within their fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/bounds.h"
#include "../pybox/journal.h"
#include "../pybox/state.h"
#include "common.h"

#define RUN_ID "0123456789abcdef0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    pybox_error_t err = {0};
    switch (data[0] % 3) {
    case 0: {
        pybox_config_t c;
        if (pybox_config_parse(text, len, "config.json", &c, &err) == 0) {
            for (int id = 0; id < PYBOX_LIMIT_COUNT; id++) {
                FUZZ_CHECK(c.limit[id] > 0, "a ceiling that is not positive: %s", pybox_limit(id)->config_key);
                FUZZ_CHECK(c.limit[id] <= pybox_limit(id)->max ||
                               (id == PYBOX_LIMIT_CPUS && pybox_limit(id)->ceiling == 0),
                           "a ceiling above its bound: %s", pybox_limit(id)->config_key);
            }
            FUZZ_CHECK(c.backend[0] == '\0' || pybox_name_valid(c.backend), "backend %s", c.backend);
        } else {
            FUZZ_CHECK(err.msg[0] != '\0', "refused without a reason");
        }
        break;
    }
    case 1: {
        pybox_pin_t *pins = NULL;
        size_t n = 0;
        if (pybox_pins_parse(NULL, text, len, "images.json", &pins, &n, &err) == 0) {
            for (size_t i = 0; i < n; i++) {
                FUZZ_CHECK(strnlen(pins[i].id, sizeof pins[i].id) < sizeof pins[i].id, "an id not terminated");
                FUZZ_CHECK(strnlen(pins[i].name, sizeof pins[i].name) < sizeof pins[i].name, "a name not terminated");
            }
            free(pins);
        } else {
            FUZZ_CHECK(pins == NULL && err.msg[0] != '\0', "refused without a reason");
        }
        break;
    }
    default: {
        int64_t expires = -1;
        if (pybox_journal_note_parse(text, len, RUN_ID, &expires) == 0) {
            /* what was taken reads back the same from a note written with it */
            char again[160];
            int n = snprintf(again, sizeof again, "{\"run_id\":\"%s\",\"expires\":%lld}", RUN_ID, (long long)expires);
            int64_t back = -1;
            FUZZ_CHECK(n > 0 && (size_t)n < sizeof again &&
                           pybox_journal_note_parse(again, (size_t)n, RUN_ID, &back) == 0 && back == expires,
                       "an expiry that does not read back");
        } else {
            FUZZ_CHECK(expires == -1, "a refused note changed the expiry");
        }
        break;
    }
    }
    return 0;
}
