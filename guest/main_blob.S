/* SPDX-License-Identifier: MIT */
/* Links the runner of a large cold program (guest/main.py) into the init, as the text
 * of the interpreter's -c argument (NUL-terminated). */
    .section .rodata
    .global pybox_guest_main_src
    .balign 16
pybox_guest_main_src:
    .incbin PYBOX_GUEST_MAIN_FILE
    .byte 0
    .section .note.GNU-stack,"",@progbits
