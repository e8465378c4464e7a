package limitconf_test

import (
	"fmt"
	"os"

	"github.com/rlprobe/rlprobe/limitconf"
)

// The nginx demo as it is usually written: limit_req next to return,
// which answers before limit_req runs.
func ExampleParse() {
	conf := `
limit_req_zone $binary_remote_addr zone=one:10m rate=1r/s;
server {
    location = / {
        limit_req zone=one burst=3 nodelay;
        return 200 "ok\n";
    }
}
`
	im, err := limitconf.Parse([]byte(conf), "nginx.conf", limitconf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range im.Rules {
		fmt.Printf("%s %s: %s\n", r.Source, r.Path, r.Describe())
	}
	for _, f := range im.Findings {
		fmt.Printf("%s %s %s at line %d\n", f.Severity, f.Certainty, f.ID, f.Source.Line)
	}
	// Output:
	// nginx.conf:5 /: token-bucket 1/s, capacity 4, key ip
	// error certain config-not-enforced at line 6
	// info possible key-behind-proxy at line 2
}

func ExampleWritePolicy() {
	conf := "limit_req_zone $http_x_api_key zone=k:1m rate=30r/m;\n" +
		"server { location = /search { limit_req zone=k burst=9 nodelay; limit_req_status 429; proxy_pass http://b; } }\n"
	im, err := limitconf.Parse([]byte(conf), "api.conf", limitconf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	limitconf.WritePolicy(os.Stdout, im)
	// Output:
	// # rlprobe policy imported from api.conf (nginx) by rlprobe policy import.
	// # Each rule names the configuration lines it comes from. Check it live with
	// #   rlprobe check BASE_URL --policy-file THIS_FILE
	// version: 1
	// endpoints:
	//   # api.conf:2: = /search
	//   #   zone k defined at api.conf:1
	//   #   token-bucket 30/m, capacity 10, key header:X-Api-Key
	//   #   key $http_x_api_key: one quota per X-Api-Key value; requests without X-Api-Key have an empty key and are not limited at all
	//   #   limit_req zone=k burst=9 nodelay: excess beyond capacity 10 = burst 9 + 1 is rejected at once, refilled at 30r/m
	//   - path: /search
	//     rate: 0.5/s
	//     capacity: 10
	//     key: "header:X-Api-Key"
	//     status: 429
}
