package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
// Keys are Ed25519, each stored twice: whole for the control plane, and its
// public half (VerifyingKey) for node agents, which verify and never sign.
type keyring struct {
	keys     *mirror[*identityv1.SigningKey]
	client   *clientv3.Client
	rotation time.Duration
	maxTTL   time.Duration
	now      func() time.Time
}

// verifyKey is what checks one key's signatures: its method, the key in
// the form that method takes, and its bytes (to tell a key replaced under
// the same id).
type verifyKey struct {
	method jwt.SigningMethod
	key    any
	raw    []byte
}

// signingKey is the key and method key signs with.
func signingKey(key *identityv1.SigningKey) (jwt.SigningMethod, any) {
	if len(key.GetPublicKey()) == 0 {
		return jwt.SigningMethodHS256, key.GetSecret()
	}
	return jwt.SigningMethodEdDSA, ed25519.NewKeyFromSeed(key.GetSecret())
}

// signer is the newest Ed25519 key that is not retired (an HMAC key from
// before verifies, and signs nothing new).
func (k *keyring) signer() (*identityv1.SigningKey, bool) {
	var best *identityv1.SigningKey
	now := k.now()
	k.keys.each(func(_ string, key *identityv1.SigningKey) {
		if len(key.GetPublicKey()) == ed25519.PublicKeySize && len(key.GetSecret()) == ed25519.SeedSize &&
			key.GetRetireTime().AsTime().After(now) &&
			(best == nil || key.GetCreateTime().AsTime().After(best.GetCreateTime().AsTime())) {
			best = key
		}
	})
	return best, best != nil
}

// verifier is the key with id, while it is not retired.
func (k *keyring) verifier(id string) (verifyKey, bool) {
	key, ok := k.keys.get(id)
	if !ok || !key.GetRetireTime().AsTime().After(k.now()) {
		return verifyKey{}, false
	}
	if pub := key.GetPublicKey(); len(pub) > 0 {
		if len(pub) != ed25519.PublicKeySize {
			return verifyKey{}, false
		}
		return verifyKey{jwt.SigningMethodEdDSA, ed25519.PublicKey(pub), pub}, true
	}
	return verifyKey{jwt.SigningMethodHS256, key.GetSecret(), key.GetSecret()}, true
}

// secret is the private part of the key with id, while it is not retired:
// page tokens are sealed under a key derived from it.
func (k *keyring) secret(id string) ([]byte, bool) {
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
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return fmt.Errorf("make a signing key: %w", err)
		}
		id := make([]byte, 6)
		_, _ = rand.Read(id)
		key := &identityv1.SigningKey{Id: fmt.Sprintf("%x-%s", now.UnixNano(), hex.EncodeToString(id)), Secret: priv.Seed(),
			PublicKey: pub, CreateTime: timestamppb.New(now), RetireTime: timestamppb.New(now.Add(k.rotation + k.maxTTL))}
		whole, err := proto.Marshal(key)
		if err != nil {
			return err
		}
		half, err := proto.Marshal(&identityv1.VerifyingKey{Id: key.GetId(), PublicKey: pub, RetireTime: key.GetRetireTime()})
		if err != nil {
			return err
		}
		// One transaction: an agent never sees a token of a key whose public
		// half is not stored yet.
		if _, err := k.client.Txn(ctx).Then(clientv3.OpPut(etcdstore.PrefixSigningKeys+key.GetId(), string(whole)),
			clientv3.OpPut(etcdstore.PrefixVerifyingKeys+key.GetId(), string(half))).Commit(); err != nil {
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
		if _, err := k.client.Txn(ctx).Then(clientv3.OpDelete(etcdstore.PrefixSigningKeys+id),
			clientv3.OpDelete(etcdstore.PrefixVerifyingKeys+id)).Commit(); err != nil {
			return fmt.Errorf("delete retired signing key: %w", err)
		}
	}
	return nil
}
