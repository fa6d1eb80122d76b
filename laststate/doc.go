// Package laststate keeps, on the pod's memory-backed proxy volume, a snapshot of what Envoy last
// accepted (the xDS responses it ACKed, as the bytes that were forwarded, per client stream), the
// DNS proxy's NameTable the agent last accepted (the resource's bytes as Istiod sent them) and
// the workload certificate, key and roots, and restores them at start when Istiod cannot be
// reached (issue 31; opt-in with WINGMAN_LAST_STATE). The name table is restored by the caller
// (Snapshot.ReadNameTable, given to the DNS proxy before the xDS proxy serves).
//
//   - format.go: the snapshot file (versioned records, SHA-256 trailer, a size bound) and its
//     decoder, which reads outside bytes and is fuzzed. Format 2 added the name table record; a
//     file of another format is refused whole.
//   - recorder.go, spool.go: what mux reports (mux.Recorder): each response sent to a client is
//     spooled to a file as it passes, never held whole in memory; an ACK makes it part of the
//     state; the snapshot is rewritten from the spools, streamed, by one goroutine off the
//     forwarding path. Recorder.NameTable hears the agent's NDS handler (the newest table waits,
//     by reference, for that goroutine to spool it).
//   - merge.go: a Delta type's accepted responses merged into one, streamed from the spools,
//     when the snapshot is written.
//   - restore.go: the checks before a snapshot is served (this pod's identity, certificate in
//     date and verified by its roots, responses and name table decoding as what they are) and
//     the source mux serves restored responses from: each read from the file in pieces as it is
//     sent (mux.RestoredResponse), never whole.
//   - tmpfs.go: the volume must be a tmpfs (statfs magic); anything else is refused, named.
package laststate
