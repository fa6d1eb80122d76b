// Package netem joins two network namespaces by a user-space packet link that delays, jitters
// (and so reorders), drops and blackholes IP packets, for the fault scenarios of perf/faults.
//
// Why user space: the kernels this project's CI and lab machines run have no sch_netem (tc
// answers "Specified qdisc kind is unknown"), no loadable modules and no NFQUEUE, so neither tc
// netem nor a queue to user space through iptables is available. A TUN device in each namespace
// (IFF_TUN|IFF_NO_PI, created by opening /dev/net/tun on a thread that has entered the
// namespace, so the device is born there) hands every IP packet routed to the peer to this
// process, which writes it into the other namespace's TUN device when its delay has passed.
// Delay, jitter, loss and the blackhole are netem's: jitter is uniform in [delay-jitter,
// delay+jitter], as `tc qdisc ... netem delay 50ms 20ms` without a distribution table, and
// packets leave in order of their due time, so jitter larger than the gap between two packets
// reorders them, as netem does.
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for setns); Available says whether
// the machine allows it and, if not, why.
package netem
