package units_test

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

func ExampleParseRate() {
	for _, s := range []string{"10/s", "30r/m", "90/h", "10"} {
		r, err := units.ParseRate(s)
		fmt.Println(r, err)
	}
	// Output:
	// 10 <nil>
	// 0.5 <nil>
	// 0.025 <nil>
	// 0 rate "10" has no unit: write it like 10/s, 10/m or 10/h
}

func ExampleHumanRate() {
	fmt.Println(units.HumanRate(40.90909090909091), units.HumanRate(0.5), units.HumanDuration(1234567891*time.Nanosecond))
	// Output: 40.91/s 30/m 1.235s
}
