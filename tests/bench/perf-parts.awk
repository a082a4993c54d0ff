# SPDX-License-Identifier: BSD-3-Clause
# perf-parts.awk: one guest's "perf report -n --sort comm,dso,sym" of a
# perf record -a, split into parts of the stack, in usec of CPU per round
# trip.  Used by bench-smcr-vm.sh --profile, in the guest:
#   perf report ... | awk -v n=ITERS -v us=USEC_PER_SAMPLE -v run=NAME \
#       -f perf-parts.awk /proc/kallsyms -
# Kernel addresses perf could not name (modules whose file it did not
# match) get the module symbol below them from /proc/kallsyms first
# (16 hex digits compare as strings).
NR == FNR { if (NF >= 4) { ka[++m] = $1; kn[m] = $3 } next }
/^#/ || NF < 6 { next }
{
    c = $2; comm = $3; dso = $4; sym = $NF
    if ($5 == "[k]" && sym ~ /^0xffffffff/) {
        a = substr(sym, 3); b = ""
        for (i = 1; i <= m; i++)
            if (ka[i] <= a && ka[i] > b) { b = ka[i]; sym = kn[i] }
    }
    if (comm ~ /^(bash|sh|sleep|cat|ss|seq)$/) p = "harn"
    else if ($5 == "[k]") {
        if (sym ~ /idle|halt|mwait/) p = "idle"
        else if (sym ~ /^_*rxe/) p = "rxe"
        else if (sym ~ /^_*(ip|udp|dev|skb|kfree_skb|net|netif|napi|virtnet|vp_|vring|virtqueue|eth|neigh|nf|csum|fib|sock|sk|tcp|inet|validate_xmit|sch_|pfifo|qdisc|handle_softirqs|do_softirq|irq_exit)/) p = "net"
        else if (sym ~ /sched|schedule|wake|finish_task_switch|__switch_to|switch_mm|pick_next|enqueue|dequeue|update_curr|update_load|psi_|futex|ep_poll|do_epoll|ep_|select_task_rq|set_next|put_prev|ttwu|_raw_spin_unlock_irqrestore/) p = "sched"
        else if (sym ~ /entry_SYSCALL|do_syscall|syscall_|__x64_sys|exit_to_user|ksys_|fdget|fput|fget|uverbs|copy_(to|from)_user|__check_object_size|^smc_/) p = "sysc"
        else if (sym ~ /^0x/) p = "mod"
        else p = "kother"
    } else if (dso ~ /ibverbs|rxe|rdmacm/) p = "verbs"
    else p = "app"
    s[p] += c; t += c
}
END {
    u = us / n
    printf "    %-12s %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f\n", run, s["app"] * u, s["verbs"] * u,
        s["sysc"] * u, s["rxe"] * u, s["net"] * u, s["sched"] * u, s["kother"] * u + s["mod"] * u, s["harn"] * u,
        s["idle"] * u, (t - s["idle"]) * u
}
