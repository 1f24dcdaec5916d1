package cli

import (
	"strings"
	"testing"
)

func TestLabCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "run", "a2", "--compare", "rr,bogus"}, `compare[1]: "bogus"`},
		{[]string{"lab", "run", "a2", "--duration", "soon"}, "--duration"},
		{[]string{"lab", "run", "a2", "--shape", "ring"}, "--shape"},
		{[]string{"lab", "run", "a2", "--shape", "split"}, "mptcp needs one interface per path"},
		{[]string{"lab", "up"}, "accepts 1 arg"},
	} {
		root := newRootCmd()
		root.SetArgs(tc.args)
		root.SetOut(new(strings.Builder))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
