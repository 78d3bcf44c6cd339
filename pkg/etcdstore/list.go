package etcdstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Page sizes (AIP-158): zero means DefaultPageSize, larger than MaxPageSize
// is capped to it, negative is ErrInvalidArgument.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Page is one page of a List.
type Page[T proto.Message] struct {
	Items []Item[T] // in key order
	// NextPageToken is opaque and empty on the last page.
	NextPageToken string
	// Revision is the etcd revision every page of this listing was read at.
	// To follow a complete listing with a Watch, start it at Revision+1.
	Revision int64
}

// PageSize is the page size a request's page_size asks for (AIP-158): 0 is
// DefaultPageSize, above MaxPageSize is capped. Negative sizes are the
// caller's to reject.
func PageSize(requested int) int {
	switch {
	case requested == 0:
		return DefaultPageSize
	case requested > MaxPageSize:
		return MaxPageSize
	}
	return requested
}

// List returns up to pageSize items whose id starts with prefixWithin ("" for
// the whole collection, "team-a/" for one project's workloads), in key order.
//
// The first call (empty pageToken) reads at the current revision; the token
// it returns carries that revision and the last key, so every later page is
// read at the same revision and the pages join into one consistent snapshot:
// writes made between pages are not seen, and nothing is seen twice or
// skipped. The token is only valid for the same collection and
// prefixWithin (else ErrInvalidPageToken); once etcd compacts the revision
// it yields ErrPageTokenExpired and the caller starts over.
func (c *Collection[T]) List(ctx context.Context, prefixWithin string, pageSize int, pageToken string) (Page[T], error) {
	listPrefix := c.prefix + prefixWithin
	if pageSize < 0 {
		return Page[T]{}, fmt.Errorf("list %s: page size %d is negative: %w", listPrefix, pageSize, ErrInvalidArgument)
	}
	pageSize = PageSize(pageSize)
	start, rev := listPrefix, int64(0)
	if pageToken != "" {
		tok, err := decodePageToken(pageToken)
		if err != nil || tok.prefix != listPrefix {
			return Page[T]{}, fmt.Errorf("list %s: page token is not from a listing of this prefix: %w", listPrefix, ErrInvalidPageToken)
		}
		// The smallest key after lastKey is lastKey + "\x00".
		start, rev = tok.lastKey+"\x00", tok.revision
	}
	resp, err := c.client.Get(ctx, start,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(listPrefix)),
		clientv3.WithLimit(int64(pageSize)),
		clientv3.WithRev(rev))
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) && rev != 0 {
			return Page[T]{}, fmt.Errorf("list %s: revision %d of the listing was compacted: %w", listPrefix, rev, ErrPageTokenExpired)
		}
		return Page[T]{}, wrapErr(ctx, "list", listPrefix, err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	page := Page[T]{Items: make([]Item[T], 0, len(resp.Kvs)), Revision: rev}
	for _, kv := range resp.Kvs {
		it, err := c.decode(kv)
		if err != nil {
			if c.skip != nil {
				c.skip(string(kv.Key), kv.ModRevision, err)
				continue
			}
			return Page[T]{}, err
		}
		page.Items = append(page.Items, it)
	}
	if resp.More && len(resp.Kvs) > 0 {
		last := string(resp.Kvs[len(resp.Kvs)-1].Key)
		page.NextPageToken = listCursor{prefix: listPrefix, lastKey: last, revision: rev}.encode()
	}
	return page, nil
}

// ListAll reads every item under prefixWithin at one revision, page by page,
// and returns them with that revision: the relist a watcher does on start
// and after ErrCompacted, before watching from the revision + 1.
func (c *Collection[T]) ListAll(ctx context.Context, prefixWithin string) ([]Item[T], int64, error) {
	var items []Item[T]
	token := ""
	for {
		page, err := c.List(ctx, prefixWithin, MaxPageSize, token)
		if err != nil {
			return nil, 0, err
		}
		items = append(items, page.Items...)
		if page.NextPageToken == "" {
			return items, page.Revision, nil
		}
		token = page.NextPageToken
	}
}

// pageTokenVersion is the first byte of every token, so the format can change.
const pageTokenVersion = 1

// listCursor is what a page token stands for. Encoded as base64url of:
// version byte, uvarint revision, uvarint len(prefix), prefix, last key.
type listCursor struct {
	prefix   string
	lastKey  string
	revision int64
}

func (t listCursor) encode() string {
	b := []byte{pageTokenVersion}
	b = binary.AppendUvarint(b, uint64(t.revision))
	b = binary.AppendUvarint(b, uint64(len(t.prefix)))
	b = append(b, t.prefix...)
	b = append(b, t.lastKey...)
	return base64.RawURLEncoding.EncodeToString(b)
}

var errBadToken = errors.New("malformed page token")

func decodePageToken(s string) (listCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 || b[0] != pageTokenVersion {
		return listCursor{}, errBadToken
	}
	r := bytes.NewReader(b[1:])
	rev, err1 := binary.ReadUvarint(r)
	n, err2 := binary.ReadUvarint(r)
	if err1 != nil || err2 != nil || rev == 0 || rev > 1<<62 || n > uint64(r.Len()) {
		return listCursor{}, errBadToken
	}
	rest := b[len(b)-r.Len():]
	t := listCursor{prefix: string(rest[:n]), lastKey: string(rest[n:]), revision: int64(rev)}
	if !strings.HasPrefix(t.lastKey, t.prefix) {
		return listCursor{}, errBadToken
	}
	return t, nil
}
