# SPDX-License-Identifier: BSD-3-Clause
# Sourced by lib.sh and kmod-prebuild.sh.
# _vm_kernel_path SPEC: prints the image SMCR_VM_KERNEL=SPEC names (a series
# or a path); 1 when there is none.
_vm_kernel_path() {
    local spec=$1 k
    case $spec in
        */*) [ -r "$spec" ] && echo "$spec" ;;
        [0-9]*.[0-9]*)
            # Debian's generic flavour: not -rt-amd64 or -cloud-amd64.
            k=$(ls -1v /boot/vmlinuz-"$spec".*-amd64 2>/dev/null |
                    grep -v -e '-rt-amd64$' -e '-cloud-amd64$' | tail -n 1)
            [ -n "$k" ] && echo "$k" ;;
        *) return 1 ;;
    esac
}
