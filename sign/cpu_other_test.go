//go:build !unix

package sign

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
