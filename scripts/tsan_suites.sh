# The tests scripts/sanitize.sh runs under TSan, sourced by it and by
# scripts/test.sh (whose main run leaves them out: each runs once, under TSan,
# its assertions and the race detector both).
# Suites, by name (ctest -R), and the targets that hold them:
#   AuditLogTest                 concurrent appenders against the batching commit
#   ClientHello.ConcurrentCallers, LeafCertsTest.ConcurrentLeafForIsSafe
#                                the proxy's TLS pieces, called from its pool
#   ExchangeTest                 an intercepted exchange: verdicts on the proxy's
#                                loop, resolution on its worker pool
#   UpstreamResolutionCache      concurrent misses sharing one resolution
#   KernelSpliceTest             the kernel relay's loop against the BPF maps
#   TapReaper, LocalAddressesWatch
#                                the registry's TAP reaper thread; the netlink
#                                watcher publishing snapshots to readers
#   AcceptBackoff                the proxy's listener loop
#   MintBudgetProxy              the proxy's loops handing leaf minting to its pool
#   SessionIndexTest, SessionProxyPolicyAudit
#                                session snapshots swapped under readers; verdicts
#                                while the audit's writer is stuck
#   GrantBookConcurrency         grant lookups on the proxy's loops against the
#                                control plane and the periodic sweep
#   ApprovalWebhook              the webhook's notifier thread against enqueue
#   ExporterTest, AuditRetentionTest, AuditExportTest
#                                the audit exporters' threads against the
#                                writer and stats readers; retention's chunks
#                                against appenders; both inside zerod
#   KvStoreTest.ConcurrentWriters...
#                                capability stores written from several threads
#   StoreSetTest.ConcurrentFirstUses...
#                                rw stores opened on first use from several threads
#   SecretScrubberConcurrency    the scrubber automata shared by the proxy loops
#   H2GuestLegTest, H2UpstreamLegTest
#                                a guest stream and a shared upstream connection
#                                on the proxy loop, their legs on exchanges
#   FairPool, ProxyWorkerShare   workers of a shared pool against posters and a stop;
#                                the proxy's decisions on them from its loops
#   ProxyTest, InterceptTest, Http2Test, WebSocketTest, Http2UpstreamTest, ZerodTest, ApprovalTest,
#   SecretUseTest, CapabilityTest,
#   IngressTest                  zerod itself: proxy loops, worker pool, audit,
#                                DNS loop, control server, the capability
#                                service's workers and the ingress loop
#                                against the control plane, with real traffic
tsan_targets=(common_tests audit_tests audit_export_tests tls_tests proxy_tests proxy_root_tests session_tests host_tests net_tests zerod_tests secrets_tests identity_tests daemon_tests resources_tests)
tsan_suites=(AuditLogTest. ClientHello.ConcurrentCallers LeafCertsTest.ConcurrentLeafForIsSafe ExchangeTest.
             AcceptBackoff. MintBudgetProxy. SessionIndexTest. SessionProxyPolicyAudit. UpstreamResolutionCache.
             KernelSpliceTest. TapReaper. LocalAddressesWatch. ProxyTest. InterceptTest. ZerodTest. GuardedBytes. JwtMinterConcurrency.
             GrantBookConcurrency. ApprovalWebhook. ApprovalTest. SecretUseTest.
             KvStoreTest.ConcurrentWritersCannotOvershootTheQuota
             StoreSetTest.ConcurrentFirstUsesShareOneReadWriteInstance CapabilityTest. CapabilityQueueTest.
             SqlBoundsTest.ASlowStatementHoldsOnlyItsOwnCall SqlBoundsTest.ACancelledCallStopsAtOnce IngressTest. CommandTest.
             ExporterTest. AuditRetentionTest. AuditExportTest. Http2Test. H2GuestLegTest. WebSocketTest.
             Http2UpstreamTest. H2UpstreamLegTest. GrpcTest. SecretScrubberConcurrency. FairPool. ProxyWorkerShare.)

# ctest -R/-E regex of the suites above (each a prefix of test names).
tsan_regex() {
  local s out=""
  for s in "${tsan_suites[@]}"; do out+="${out:+|}^${s//./\\.}"; done
  echo "$out"
}
