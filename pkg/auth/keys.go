package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// keyring signs with the newest signing key in etcd and verifies with any
// key not yet retired. Every process of the control plane may rotate: a new
// key is added when the newest is older than the rotation period, and a key
// is deleted after its retire time, when no token it signed can still be
// valid (retire = creation + rotation period + the longest token lifetime).
type keyring struct {
	keys     *mirror[*identityv1.SigningKey]
	client   *clientv3.Client
	rotation time.Duration
	maxTTL   time.Duration
	now      func() time.Time
}

// signer is the newest key that is not retired.
func (k *keyring) signer() (*identityv1.SigningKey, bool) {
	var best *identityv1.SigningKey
	now := k.now()
	k.keys.each(func(_ string, key *identityv1.SigningKey) {
		if key.GetRetireTime().AsTime().After(now) &&
			(best == nil || key.GetCreateTime().AsTime().After(best.GetCreateTime().AsTime())) {
			best = key
		}
	})
	return best, best != nil
}

// verifier is the key with id, while it is not retired.
func (k *keyring) verifier(id string) ([]byte, bool) {
	key, ok := k.keys.get(id)
	if !ok || !key.GetRetireTime().AsTime().After(k.now()) {
		return nil, false
	}
	return key.GetSecret(), true
}

// rotate adds a key when there is none younger than the rotation period and
// deletes retired ones. Two processes rotating at once add two keys; both
// are valid, and the newest signs.
func (k *keyring) rotate(ctx context.Context) error {
	now := k.now()
	if key, ok := k.signer(); !ok || now.Sub(key.GetCreateTime().AsTime()) >= k.rotation {
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		id := make([]byte, 6)
		_, _ = rand.Read(id)
		key := &identityv1.SigningKey{Id: fmt.Sprintf("%x-%s", now.UnixNano(), hex.EncodeToString(id)), Secret: secret,
			CreateTime: timestamppb.New(now), RetireTime: timestamppb.New(now.Add(k.rotation + k.maxTTL))}
		b, err := proto.Marshal(key)
		if err != nil {
			return err
		}
		if _, err := k.client.Put(ctx, etcdstore.PrefixSigningKeys+key.GetId(), string(b)); err != nil {
			return fmt.Errorf("store a new signing key: %w", err)
		}
		// Sign with it at once, without waiting for the watch.
		k.keys.mu.Lock()
		k.keys.items[key.GetId()] = key
		k.keys.mu.Unlock()
	}
	var retired []string
	k.keys.each(func(id string, key *identityv1.SigningKey) {
		if !key.GetRetireTime().AsTime().After(now) {
			retired = append(retired, id)
		}
	})
	for _, id := range retired {
		if _, err := k.client.Delete(ctx, etcdstore.PrefixSigningKeys+id); err != nil {
			return fmt.Errorf("delete retired signing key: %w", err)
		}
	}
	return nil
}
