package meshlab

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watch reloads the resources folder after changes to its resource files, debounced, until
// ctx is done.
func (s *Server) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("meshlab: watch %s: %w", s.cfg.ResourcesDir, err)
	}
	defer w.Close()
	if err := w.Add(s.cfg.ResourcesDir); err != nil {
		return fmt.Errorf("meshlab: watch %s: %w", s.cfg.ResourcesDir, err)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !resourceFile(filepath.Base(ev.Name)) || ev.Op == fsnotify.Chmod {
				continue
			}
			timer.Reset(s.cfg.Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.cfg.Logger.Warn("meshlab: watching resources", "dir", s.cfg.ResourcesDir, "err", err)
			timer.Reset(s.cfg.Debounce) // events may have been lost: read the folder again
		case <-timer.C:
			s.Reload()
		}
	}
}
