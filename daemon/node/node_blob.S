/* SPDX-License-Identifier: Apache-2.0 */
/* devgated-node's bytes inside devgated (zygote.c); NODE_BIN is its path at build time. */
	.section .rodata
	.balign 16
	.global node_bin
node_bin:
	.incbin NODE_BIN
node_bin_end:
	.balign 8
	.global node_bin_size
node_bin_size:
	.quad node_bin_end - node_bin
	.section .note.GNU-stack,"",@progbits
