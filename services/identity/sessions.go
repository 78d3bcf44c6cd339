package identity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Sessions: a sign-in starts a session whose refresh tokens rotate. Each
// refresh token carries the session id and its sequence number; a refresh
// moves the session to the next number and hands out the token for it, so
// exactly one refresh token of a session works at a time. Presenting an
// older one (a stolen copy used after its owner, or the owner after the
// thief) ends the whole session. The session lives under a lease of the
// refresh lifetime, so a family never outlives the sign-in by more than
// that. An SSO user's session is checked again at each refresh: its user
// must still be an SSO user of the issuer this deployment trusts.

func sessionKey(id string) string { return etcdstore.PrefixSessions + id }

// sessionsOf is the prefix of principal's session index: a key per live
// session, under the session's lease.
func sessionsOf(principal string) string {
	return etcdstore.PrefixUserSessions + hashed(principal) + "/"
}

// endSession deletes a session and its index key.
func (s *Server) endSession(ctx context.Context, principal, id string) error {
	if _, err := s.client.Txn(ctx).Then(clientv3.OpDelete(sessionKey(id)), clientv3.OpDelete(sessionsOf(principal)+id)).Commit(); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// appSessionsFactor is how many times a user's live sessions an
// application may hold.
const appSessionsFactor = 10

// capSessions ends principal's oldest sessions beyond the most allowed:
// signing in again and again cannot fill the store, nor hold sessions
// without end.
func (s *Server) capSessions(ctx context.Context, principal string) error {
	resp, err := s.client.Get(ctx, sessionsOf(principal), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	limit := s.cfg.MaxSessions
	if !strings.HasPrefix(principal, "users/") {
		// An application's sign-ins are its jobs', many at once (CI).
		limit *= appSessionsFactor
	}
	if len(resp.Kvs) <= limit {
		return nil
	}
	kvs := resp.Kvs
	// Oldest first: in the order they were written.
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
	for _, kv := range kvs[:len(kvs)-limit] {
		id := strings.TrimPrefix(string(kv.Key), sessionsOf(principal))
		if err := s.endSession(ctx, principal, id); err != nil {
			return err
		}
		s.log.Info("identity: oldest session ended: too many sign-ins", "principal", principal, "limit", limit)
	}
	return nil
}

// startSession records a new session for sub and returns sub with it.
func (s *Server) startSession(ctx context.Context, sub auth.Subject, sso bool) (auth.Subject, error) {
	lease, err := s.client.Grant(ctx, int64(s.guard.RefreshTTL().Seconds())+1)
	if err != nil {
		return sub, fmt.Errorf("start a session: %w", err)
	}
	sess := &identityv1.Session{Id: strings.ReplaceAll(newUID(), "-", ""), Principal: sub.Principal, Sequence: 1,
		CreateTime: s.timestamp()}
	if sso {
		sess.IdentityProvider = s.cfg.OIDC.Issuer
	}
	b, err := proto.Marshal(sess)
	if err != nil {
		return sub, err
	}
	put, err := s.client.Txn(ctx).Then(clientv3.OpPut(sessionKey(sess.GetId()), string(b), clientv3.WithLease(lease.ID)),
		clientv3.OpPut(sessionsOf(sub.Principal)+sess.GetId(), "", clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return sub, fmt.Errorf("start a session: %w", err)
	}
	if err := s.capSessions(ctx, sub.Principal); err != nil {
		s.log.Warn("identity: sessions not capped", "principal", sub.Principal, "err", err)
	}
	sub.Session, sub.Sequence, sub.SessionRevision = sess.GetId(), sess.GetSequence(), put.Header.GetRevision()
	return sub, nil
}

// refresh exchanges a refresh token for the subject of its session's next
// turn, or ends the session on reuse.
func (s *Server) refresh(ctx context.Context, token string) (auth.Subject, error) {
	sub, err := s.guard.VerifyRefresh(ctx, token)
	if err != nil || sub.Session == "" {
		return auth.Subject{}, errCredentials
	}
	key := sessionKey(sub.Session)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return auth.Subject{}, fmt.Errorf("read session: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return auth.Subject{}, errCredentials // ended, or expired
	}
	kv := resp.Kvs[0]
	sess := &identityv1.Session{}
	if err := proto.Unmarshal(kv.Value, sess); err != nil {
		return auth.Subject{}, fmt.Errorf("decode session %s: %w", sub.Session, err)
	}
	end := func(why string) (auth.Subject, error) {
		s.log.Warn("identity: session ended", "principal", sess.GetPrincipal(), "why", why)
		if err := s.endSession(ctx, sess.GetPrincipal(), sub.Session); err != nil {
			return auth.Subject{}, err
		}
		return auth.Subject{}, errCredentials
	}
	if sess.GetPrincipal() != sub.Principal || sess.GetSequence() != sub.Sequence {
		return end("a refresh token was used again")
	}
	if err := s.stillSSO(ctx, sess); err != nil {
		return end(err.Error())
	}
	sess.Sequence++
	b, err := proto.Marshal(sess)
	if err != nil {
		return auth.Subject{}, err
	}
	txn, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return auth.Subject{}, fmt.Errorf("advance session: %w", err)
	}
	if !txn.Succeeded {
		return end("two refreshes raced with one refresh token")
	}
	sub.Sequence = sess.GetSequence()
	return sub, nil
}

// stillSSO: an SSO session refreshes only while this deployment still trusts
// its issuer and its user is still that issuer's.
func (s *Server) stillSSO(ctx context.Context, sess *identityv1.Session) error {
	iss := sess.GetIdentityProvider()
	if iss == "" {
		return nil
	}
	if s.cfg.OIDC == nil || s.cfg.OIDC.Issuer != iss {
		return errors.New("single sign-on with the session's issuer is no longer configured")
	}
	it, err := s.users.Get(ctx, userID(sess.GetPrincipal()))
	if err != nil || it.Msg.GetUser().GetIdentityProvider() != iss {
		return errors.New("the user is no longer an SSO user of the session's issuer")
	}
	return nil
}

// Logout ends the caller's session: the guards drop its access tokens as
// their mirrors see the delete, and its refresh token finds nothing.
func (s *Server) Logout(ctx context.Context, _ *identityv1.LogoutRequest) (*emptypb.Empty, error) {
	c, ok := auth.CallerFrom(ctx)
	if !ok {
		return nil, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_MISSING)
	}
	if c.Session == "" {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_NO_SESSION, c.Principal,
			"This token belongs to no sign-in and cannot be signed out; it ends when it expires.")
	}
	if err := s.endSession(ctx, c.Principal, c.Session); err != nil {
		return nil, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second).WithCause(err)
	}
	return &emptypb.Empty{}, nil
}
