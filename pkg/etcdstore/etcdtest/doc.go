// Package etcdtest starts embedded etcd servers: one per test (New), or one
// kept in a data directory for the single-process `runway dev` mode
// (StartEmbedded). Both are the real etcd server (server/v3/embed) on
// 127.0.0.1, so tests exercise the same Txn, watch and compaction behaviour
// as production; there are no mocks.
package etcdtest
