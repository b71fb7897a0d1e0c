/* SPDX-License-Identifier: MIT */
/* Links PyBox's interpreter bootstrap (guest/bootstrap.py) into the binary, so every image
 * built gets the bootstrap this PyBox speaks the guest protocol with. */
    .section .rodata
    .global pybox_bootstrap_src
    .global pybox_bootstrap_src_end
    .balign 16
pybox_bootstrap_src:
    .incbin PYBOX_BOOTSTRAP_FILE
pybox_bootstrap_src_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
