/* SPDX-License-Identifier: MIT */
/* Boot stub of the example unikernel: QEMU's -kernel (multiboot v1) enters here in 32-bit
 * protected mode with paging off. The multiboot header uses the "address fields" form
 * (flag 16), so the loader copies the image by those addresses and never looks at the ELF
 * class: the kernel can stay one ELF64 file, which is also what the host reads symbols from.
 * The stub clears .bss, identity-maps the first GiB with 2 MiB pages (addresses above it
 * fault, which the fault test uses), enables SSE (the core's writer stores a double), enters
 * long mode and calls kmain(multiboot_info, magic) with a zero frame pointer, where the
 * kernel's frame-pointer backtraces stop. */
#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00010002 /* bit 1: memory info; bit 16: address fields are valid */

  .section .multiboot, "a"
  .balign 4
mb_header:
  .long MB_MAGIC
  .long MB_FLAGS
  .long -(MB_MAGIC + MB_FLAGS)
  .long mb_header
  .long __load_start
  .long __load_end
  .long __bss_end
  .long _start32

  .section .boot, "ax"
  .code32
  .globl _start32
_start32:
  cli
  mov %eax, %esi /* multiboot magic; %ebx holds the info pointer: both kept for kmain */
  mov $__bss_start, %edi
  mov $__bss_end, %ecx
  sub %edi, %ecx
  xor %eax, %eax
  cld
  rep stosb
  mov $boot_stack_top, %esp

  mov $pdpt, %eax
  or $3, %eax
  mov %eax, pml4
  mov $pd, %eax
  or $3, %eax
  mov %eax, pdpt
  xor %ecx, %ecx
1:
  mov %ecx, %eax
  shl $21, %eax
  or $0x83, %eax /* present, writable, 2 MiB page */
  mov %eax, pd(, %ecx, 8)
  inc %ecx
  cmp $512, %ecx
  jne 1b

  mov $pml4, %eax
  mov %eax, %cr3
  mov %cr4, %eax
  or $((1 << 5) | (1 << 9) | (1 << 10)), %eax /* PAE, OSFXSR, OSXMMEXCPT */
  mov %eax, %cr4
  mov $0xC0000080, %ecx /* EFER.LME */
  rdmsr
  or $(1 << 8), %eax
  wrmsr
  mov %cr0, %eax
  and $~(1 << 2), %eax /* no x87 emulation */
  or $((1 << 31) | (1 << 1)), %eax /* paging, monitor coprocessor */
  mov %eax, %cr0
  lgdt gdt_ptr
  ljmp $0x08, $long_mode

  .code64
long_mode:
  mov $0x10, %ax
  mov %ax, %ds
  mov %ax, %es
  mov %ax, %ss
  mov %ax, %fs
  mov %ax, %gs
  mov $boot_stack_top, %rsp
  xor %ebp, %ebp
  mov %ebx, %edi
  call kmain
2:
  cli
  hlt
  jmp 2b

/* Exception entry points 0..31: each pushes a zero error code where the CPU pushes none, then
 * its vector, so kfault() always sees [vector, error, rip, cs, rflags, rsp, ss]. */
  .macro vec n
isr\n:
  .if (\n == 8) || (\n == 10) || (\n == 11) || (\n == 12) || (\n == 13) || (\n == 14) || (\n == 17) || (\n == 21) || (\n == 29) || (\n == 30)
  .else
  pushq $0
  .endif
  pushq $\n
  jmp isr_common
  .endm
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  vec \n
  .endr
isr_common:
  mov %rsp, %rdi
  and $-16, %rsp
  xor %ebp, %ebp
  call kfault
3:
  cli
  hlt
  jmp 3b

  .section .rodata
  .balign 8
  .globl isr_table
isr_table:
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  .quad isr\n
  .endr
  .balign 8
gdt:
  .quad 0
  .quad 0x00209A0000000000 /* 64-bit code, present, ring 0 */
  .quad 0x0000920000000000 /* data, present, writable */
gdt_ptr:
  .word gdt_ptr - gdt - 1
  .long gdt

  .section .bss
  .balign 4096
pml4:
  .skip 4096
pdpt:
  .skip 4096
pd:
  .skip 4096
  .balign 16
  .globl boot_stack, boot_stack_top
boot_stack:
  .skip 65536
boot_stack_top:
