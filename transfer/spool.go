package transfer

import (
	"bufio"
	"bytes"
	"io"
	"os"
)

// spoolMemory is how many bytes of one conversation's records an import
// keeps in memory before it spills them to a temporary file.
const spoolMemory = 8 << 20

// spool holds one conversation's canonical record lines between the pass
// that checks them and the pass that writes them, in memory while they are
// small and in a temporary file beyond spoolMemory: an import's memory
// does not grow with a conversation's length.
type spool struct {
	buf  bytes.Buffer
	file *os.File
	w    *bufio.Writer
}

func (s *spool) add(line []byte) error {
	if s.file == nil && s.buf.Len()+len(line)+1 > spoolMemory {
		f, err := os.CreateTemp("", "chatmem-import-*.ndjson")
		if err != nil {
			return err
		}
		s.file, s.w = f, bufio.NewWriter(f)
		if _, err := s.w.Write(s.buf.Bytes()); err != nil {
			return err
		}
		s.buf = bytes.Buffer{}
	}
	if s.file != nil {
		if _, err := s.w.Write(line); err != nil {
			return err
		}
		return s.w.WriteByte('\n')
	}
	s.buf.Write(line)
	s.buf.WriteByte('\n')
	return nil
}

// reader returns the lines added so far, from the first.
func (s *spool) reader() (*bufio.Reader, error) {
	if s.file == nil {
		return bufio.NewReader(bytes.NewReader(s.buf.Bytes())), nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return bufio.NewReaderSize(s.file, 1<<16), nil
}

// reset empties the spool for the next conversation and removes its file.
func (s *spool) reset() {
	s.buf.Reset()
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
		s.file, s.w = nil, nil
	}
}
