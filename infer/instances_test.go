package infer

import "testing"

// TestJudgeInstances: the decision from the two paced runs' counts alone
// (before a fit of one instance says what its quota is).
func TestJudgeInstances(t *testing.T) {
	tests := []struct {
		name        string
		one, fresh  connRun
		want        *Instances
		wantCertain bool
	}{
		{"one instance", connRun{accepted: 5, rejected: 3}, connRun{accepted: 5, rejected: 3}, nil, false},
		{"one instance, a token refilled on the way", connRun{accepted: 5, rejected: 3}, connRun{accepted: 6, rejected: 2}, nil, false},
		{"a racy shared counter paced", connRun{accepted: 10, rejected: 3}, connRun{accepted: 10, rejected: 3}, nil, false},
		{"two instances", connRun{accepted: 5, rejected: 3}, connRun{accepted: 10, rejected: 3}, &Instances{2, 2, 2, BalanceConnection}, true},
		{"three instances", connRun{accepted: 5, rejected: 3}, connRun{accepted: 15, rejected: 3}, &Instances{3, 3, 3, BalanceConnection}, true},
		{"four instances", connRun{accepted: 8, rejected: 3}, connRun{accepted: 32, rejected: 3}, &Instances{4, 4, 4, BalanceConnection}, true},
		{"four instances of a bucket that refilled", connRun{accepted: 8, rejected: 3}, connRun{accepted: 34, rejected: 3}, &Instances{4, 4, 4, BalanceConnection}, true},
		{"one per instance: the counts allow two to five", connRun{accepted: 2, rejected: 3}, connRun{accepted: 5, rejected: 3}, &Instances{3, 2, 5, BalanceConnection}, false},
		{"never refused on new connections: a lower bound", connRun{accepted: 5, rejected: 3}, connRun{accepted: 15, rejected: 0}, &Instances{3, 3, maxInstancesInferred, BalanceConnection}, false},
		{"between whole multiples", connRun{accepted: 20, rejected: 3}, connRun{accepted: 50, rejected: 3}, &Instances{3, 2, 3, BalanceConnection}, false},
		{"one connection never refused: nothing learned", connRun{accepted: 5, rejected: 0}, connRun{accepted: 15, rejected: 3}, nil, false},
		{"nothing admitted on one connection", connRun{accepted: 0, rejected: 8}, connRun{accepted: 15, rejected: 3}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, certain := judgeRuns(tt.one, tt.fresh)
			switch {
			case (got == nil) != (tt.want == nil):
				t.Fatalf("judgeInstances = %+v, want %+v", got, tt.want)
			case got != nil && *got != *tt.want:
				t.Errorf("judgeInstances = %+v, want %+v", *got, *tt.want)
			}
			if certain != tt.wantCertain {
				t.Errorf("certain = %v, want %v", certain, tt.wantCertain)
			}
		})
	}
}
