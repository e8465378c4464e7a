package headers

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Vendor field names, spelled as their vendors document them.
const (
	fieldOpenAILimitRequests     = "x-ratelimit-limit-requests"
	fieldOpenAIRemainingRequests = "x-ratelimit-remaining-requests"
	fieldOpenAIResetRequests     = "x-ratelimit-reset-requests"
	fieldOpenAILimitTokens       = "x-ratelimit-limit-tokens"
	fieldOpenAIRemainingTokens   = "x-ratelimit-remaining-tokens"
	fieldOpenAIResetTokens       = "x-ratelimit-reset-tokens"
	fieldShopify                 = "X-Shopify-Shop-Api-Call-Limit"
)

// openAIQuota is one of OpenAI's two quotas: its name (the Name of its
// Policy and Limit), its quota unit and its three fields.
type openAIQuota struct {
	name, unit              string
	limit, remaining, reset string
}

// openAIQuotas are OpenAI's quotas, in the order Parse reports them.
var openAIQuotas = []openAIQuota{
	{"requests", "", fieldOpenAILimitRequests, fieldOpenAIRemainingRequests, fieldOpenAIResetRequests},
	{"tokens", "tokens", fieldOpenAILimitTokens, fieldOpenAIRemainingTokens, fieldOpenAIResetTokens},
}

// openAIQuotaOf returns the quota named name, or nil.
func openAIQuotaOf(name string) *openAIQuota {
	for i := range openAIQuotas {
		if openAIQuotas[i].name == name {
			return &openAIQuotas[i]
		}
	}
	return nil
}

// openai reads OpenAI's fields. Each quota present becomes, as in draft-8,
// a Policy (its limit, no window: OpenAI does not say it) and a Limit of
// the same Name (remaining, and reset: the delay until the quota is full
// again).
func (p *parser) openai() {
	for _, q := range openAIQuotas {
		limVals, remVals, resVals := Values(p.h, q.limit), Values(p.h, q.remaining), Values(p.h, q.reset)
		if limVals == nil && remVals == nil && resVals == nil {
			continue
		}
		if limVals != nil {
			value := strings.Join(limVals, ", ")
			if n, ok := parseDigits(strings.Trim(value, " \t")); ok {
				p.out.Policies = append(p.out.Policies, Policy{Name: q.name, Quota: n, Unit: q.unit, Dialect: OpenAI})
			} else {
				p.problem(q.limit, value, "not a non-negative integer")
			}
		}
		lim := Limit{Name: q.name, Dialect: OpenAI}
		if remVals != nil {
			value := strings.Join(remVals, ", ")
			if n, ok := parseDigits(strings.Trim(value, " \t")); ok {
				lim.Remaining, lim.HasRemaining = n, true
			} else {
				p.problem(q.remaining, value, "not a non-negative integer")
			}
		}
		if resVals != nil {
			value := strings.Join(resVals, ", ")
			if d, ok := parseOpenAIDuration(value); ok {
				lim.Reset, lim.HasReset = d, true
			} else {
				p.problem(q.reset, value, "not a duration such as 6m0s, 1s or 20ms")
			}
		}
		if lim.HasRemaining || lim.HasReset {
			p.out.Limits = append(p.out.Limits, lim)
		}
	}
}

// parseOpenAIDuration reads OpenAI's reset: a non-negative duration in Go's
// syntax ("6m0s", "1.5s", "20ms", "0s"), or a bare number of seconds as
// some OpenAI-compatible servers send it.
func parseOpenAIDuration(v string) (time.Duration, bool) {
	s := strings.Trim(v, " \t")
	if whole, frac, ok := parseDecimal(s); ok {
		d := secondsDuration(whole)
		if d > math.MaxInt64-time.Duration(frac) {
			return math.MaxInt64, true
		}
		return d + time.Duration(frac), true
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// shopify reads X-Shopify-Shop-Api-Call-Limit: USED/SIZE, the calls in
// Shopify's leaky bucket and how many it holds.
func (p *parser) shopify() {
	vals := Values(p.h, fieldShopify)
	if vals == nil {
		return
	}
	value := strings.Join(vals, ", ")
	u, l, ok := strings.Cut(strings.Trim(value, " \t"), "/")
	used, uok := parseDigits(strings.Trim(u, " \t"))
	size, lok := parseDigits(strings.Trim(l, " \t"))
	if !ok || !uok || !lok {
		p.problem(fieldShopify, value, "not USED/SIZE such as 32/40")
		return
	}
	lim := Limit{Limit: size, HasLimit: true, Used: used, HasUsed: true, Dialect: Shopify}
	if used <= size {
		lim.Remaining, lim.HasRemaining = size-used, true
	} else {
		p.problem(fieldShopify, value, "%d calls used in a bucket of %d", used, size)
	}
	p.out.Limits = append(p.out.Limits, lim)
}

// writeOpenAI formats OpenAI's fields from its policies and limits (the
// first of each name wins; names other than requests and tokens are not
// OpenAI's and are left out).
func writeOpenAI(h http.Header, pols []Policy, lims []Limit) {
	done := map[string]bool{}
	for _, p := range pols {
		q := openAIQuotaOf(p.Name)
		if p.Dialect != OpenAI || q == nil || done[q.limit] {
			continue
		}
		done[q.limit] = true
		setField(h, q.limit, strconv.FormatInt(max(0, p.Quota), 10))
	}
	for _, l := range lims {
		q := openAIQuotaOf(l.Name)
		if l.Dialect != OpenAI || q == nil || done[q.remaining] {
			continue
		}
		done[q.remaining] = true
		if l.HasRemaining {
			setField(h, q.remaining, strconv.FormatInt(max(0, l.Remaining), 10))
		}
		if l.HasReset {
			setField(h, q.reset, max(0, l.Reset).String())
		}
	}
}

// writeShopify formats X-Shopify-Shop-Api-Call-Limit from the first
// Shopify limit that knows its size and its use (or what remains).
func writeShopify(h http.Header, lims []Limit) {
	for _, l := range lims {
		if l.Dialect != Shopify || !l.HasLimit || !(l.HasUsed || l.HasRemaining) {
			continue
		}
		used := l.Used
		if !l.HasUsed {
			used = l.Limit - l.Remaining
		}
		setField(h, fieldShopify, fmt.Sprintf("%d/%d", max(0, used), max(0, l.Limit)))
		return
	}
}
