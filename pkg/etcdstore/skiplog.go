package etcdstore

import (
	"log/slog"
	"strings"
	"sync"
)

// skipLogMax bounds the keys a SkipLog remembers, so a flood of bad values
// cannot grow it without end; past it every skip is still counted.
const skipLogMax = 1024

// SkipLog is the report function for Collection.SkipUndecodable that
// readers share: every skipped value is counted (by the collection prefix,
// through count), and logged once per key and revision.
type SkipLog struct {
	log   *slog.Logger
	who   string
	count func(prefix string)

	mu     sync.Mutex
	logged map[string]int64 // key → the revision logged
	total  int64
}

// NewSkipLog returns a SkipLog logging to log as who; count, if not nil,
// is called with the key's collection prefix for every skipped value.
func NewSkipLog(log *slog.Logger, who string, count func(prefix string)) *SkipLog {
	return &SkipLog{log: log, who: who, count: count, logged: map[string]int64{}}
}

// Report is the func to give Collection.SkipUndecodable.
func (s *SkipLog) Report(key string, modRev int64, err error) {
	if s.count != nil {
		s.count(collectionPrefix(key))
	}
	s.mu.Lock()
	s.total++
	seen, ok := s.logged[key]
	first := !ok || seen != modRev
	if first && (ok || len(s.logged) < skipLogMax) {
		s.logged[key] = modRev
	}
	s.mu.Unlock()
	if first {
		s.log.Error(s.who+": skipping a stored value that does not decode", "key", key, "revision", modRev, "err", err)
	}
}

// Total is how many values were skipped so far.
func (s *SkipLog) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// collectionPrefix is the schema prefix a key is under ("" if none).
func collectionPrefix(key string) string {
	best := ""
	for _, p := range prefixes {
		if !p.Single && strings.HasPrefix(key, p.Key) && len(p.Key) > len(best) {
			best = p.Key
		}
	}
	return best
}
