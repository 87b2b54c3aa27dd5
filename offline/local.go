package offline

import "github.com/chatmem/chatmem"

var (
	_ chatmem.Local = (*Summarizer)(nil)
	_ chatmem.Local = (*Rules)(nil)
)

// Local reports true: the summarizer runs in the process, with no model to
// pay, so Memory takes no lease across replicas before calling it.
func (*Summarizer) Local() bool { return true }

// Local reports true: the rules run in the process, with no model to pay,
// so Memory takes no lease across replicas before calling them.
func (*Rules) Local() bool { return true }
