package report

import (
	"strconv"
	"strings"

	"github.com/rlprobe/rlprobe/record"
)

// TEMPORARY: stands in for record.Classify until it lands on main.

type shimClass string

const (
	shimAccepted shimClass = "accepted"
	shimRejected shimClass = "rejected"
	shimOther    shimClass = "other"
	shimError    shimClass = "error"
	shimNotSent  shimClass = "not-sent"
)

func shimClassify(r record.Result, declared int) (shimClass, bool) {
	switch r.Outcome {
	case record.OutcomeError:
		return shimError, false
	case record.OutcomeNotSent:
		return shimNotSent, false
	}
	age := 0
	for k, v := range r.Headers {
		if strings.EqualFold(k, "Age") && len(v) > 0 {
			age, _ = strconv.Atoi(v[0])
		}
	}
	switch {
	case age > 0:
		return shimOther, false
	case r.Status >= 200 && r.Status <= 299:
		return shimAccepted, false
	case r.Status == declared && declared != 0:
		return shimRejected, false
	case r.Status == 429 || r.Status == 503:
		return shimRejected, declared != 0
	}
	return shimOther, false
}
