package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// The sign-in indexes: an unauthenticated Login names a user by email, an
// application by client id, an SSO user by (issuer, sub), and must find it
// with one key read rather than by reading every user or application. Each
// index key holds the id it points to; it is written in the transaction
// that creates its user or application (a create-only condition, so two
// creates cannot both take an email) and deleted with it. A reader checks
// what it finds against the indexed field, so a stale entry is a miss, not
// a wrong user.

func hashed(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

func emailKey(email string) string {
	return etcdstore.PrefixUserEmails + hashed(strings.ToLower(strings.TrimSpace(email)))
}
func clientIDKey(clientID string) string { return etcdstore.PrefixClientIDs + hashed(clientID) }
func ssoKey(issuer, sub string) string   { return etcdstore.PrefixSSOSubjects + hashed(issuer, sub) }

// indexed reads the id an index key points to; "" when there is none.
func (s *Server) indexed(ctx context.Context, key string) (string, error) {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("read sign-in index: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// userByIndex is the user an index key points to, if any.
func (s *Server) userByIndex(ctx context.Context, key string) (etcdstore.Item[*identityv1.StoredUser], bool, error) {
	id, err := s.indexed(ctx, key)
	if err != nil || id == "" {
		return etcdstore.Item[*identityv1.StoredUser]{}, false, err
	}
	it, err := s.users.Get(ctx, id)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return it, false, nil
	}
	return it, err == nil, err
}

// appByClientID is the application with clientID, if any.
func (s *Server) appByClientID(ctx context.Context, clientID string) (etcdstore.Item[*identityv1.StoredApplication], bool, error) {
	if clientID == "" {
		return etcdstore.Item[*identityv1.StoredApplication]{}, false, nil
	}
	id, err := s.indexed(ctx, clientIDKey(clientID))
	if err != nil || id == "" {
		return etcdstore.Item[*identityv1.StoredApplication]{}, false, err
	}
	it, err := s.apps.Get(ctx, id)
	if errors.Is(err, etcdstore.ErrNotFound) || err == nil && it.Msg.GetApplication().GetClientId() != clientID {
		return it, false, nil
	}
	return it, err == nil, err
}

// userIndexKeys are the index keys of a stored user: its email while it is
// a local user, its (issuer, sub) while it is an SSO user.
func userIndexKeys(u *identityv1.StoredUser) []string {
	if iss := u.GetUser().GetIdentityProvider(); iss != "" {
		return []string{ssoKey(iss, u.GetOidcSubject())}
	}
	if e := u.GetUser().GetEmail(); e != "" {
		return []string{emailKey(e)}
	}
	return nil
}

// userIndexes are the index keys pointing to the user it, to delete with
// it: its own, and the email of a local user since linked to SSO.
func (s *Server) userIndexes(ctx context.Context, it etcdstore.Item[*identityv1.StoredUser]) ([]string, error) {
	keys := userIndexKeys(it.Msg)
	if it.Msg.GetUser().GetIdentityProvider() != "" && it.Msg.GetUser().GetEmail() != "" {
		k := emailKey(it.Msg.GetUser().GetEmail())
		id, err := s.indexed(ctx, k)
		if err != nil {
			return nil, err
		}
		if id == it.ID {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// backfillIndexes writes the index keys missing for the users and
// applications of a store made before the indexes (or left behind by a
// crash between writes of an older binary): once per start.
func (s *Server) backfillIndexes(ctx context.Context) error {
	users, _, err := s.users.ListAll(ctx, "")
	if err != nil {
		return fmt.Errorf("index users: %w", err)
	}
	var ops []clientv3.Op
	for _, it := range users {
		for _, k := range userIndexKeys(it.Msg) {
			ops = append(ops, putIfAbsent(k, it.ID))
		}
	}
	apps, _, err := s.apps.ListAll(ctx, "")
	if err != nil {
		return fmt.Errorf("index applications: %w", err)
	}
	for _, it := range apps {
		if c := it.Msg.GetApplication().GetClientId(); c != "" {
			ops = append(ops, putIfAbsent(clientIDKey(c), it.ID))
		}
	}
	for _, op := range ops {
		if _, err := s.client.Do(ctx, op); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	return nil
}

// putIfAbsent is a transaction putting key (to id) only where it is absent.
func putIfAbsent(key, id string) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, id)}, nil)
}
