package cli

import (
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// durationValue is a pflag.Value for durations that refuses bare numbers.
type durationValue struct{ d *time.Duration }

// DurationValue returns a flag value that stores into d.
func DurationValue(d *time.Duration) *durationValue { return &durationValue{d} }

func (v *durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}
func (v *durationValue) Type() string { return "duration" }
func (v *durationValue) Set(s string) error {
	d, err := units.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// rateValue is a pflag.Value for rates (N/s, N/m, N/h, Nr/s, Nr/m) that
// stores requests per second.
type rateValue struct {
	r   *float64
	raw string
}

// RateValue returns a flag value that stores requests per second into r.
func RateValue(r *float64) *rateValue { return &rateValue{r: r} }

func (v *rateValue) String() string { return v.raw }
func (v *rateValue) Type() string   { return "rate" }
func (v *rateValue) Set(s string) error {
	r, err := units.ParseRate(s)
	if err != nil {
		return err
	}
	*v.r, v.raw = r, s
	return nil
}
