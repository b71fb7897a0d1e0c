/* SPDX-License-Identifier: MIT */
/* Links PyBox's seccomp profile (seccomp.json) into the binary, so the profile that is
 * verified is the one that was built, whatever the working directory. */
    .section .rodata
    .global pybox_seccomp_src
    .global pybox_seccomp_src_end
    .balign 16
pybox_seccomp_src:
    .incbin PYBOX_SECCOMP_FILE
pybox_seccomp_src_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
