// Package sealing seals credential values at rest: AES-256-GCM under the
// platform's keys, read from a key file the workload service holds (never
// etcd, so a copy of etcd's data opens nothing).
//
// The key file holds one key a line, "ID BASE64(32 bytes)", oldest first;
// values are sealed under the last (the newest) and opened with whichever
// key sealed them, so keys rotate without downtime:
//
//	AddKey(file)           a new newest key (the service reads the file again when it changes)
//	ReencryptCredentials   every value sealed again under the newest
//	PruneKeys(file)        the older keys removed
//
// Each value is sealed with a random 96-bit nonce and additional data the
// caller chooses (the credential's name), so a sealed value copied to
// another credential does not open.
package sealing
