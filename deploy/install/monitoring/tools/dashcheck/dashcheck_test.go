// Package dashcheck checks that every query of operator-host's Grafana dashboard returns
// series over what a real host exports: two scrapes of its /metrics, evaluated by
// Prometheus' own PromQL engine.
package dashcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
)

// scrapeInterval is how far apart the two scrapes are placed: the test that takes them
// waits at least this long between them, and rates need two samples in their window.
const scrapeInterval = 15 * time.Second

// What Grafana puts in place of the dashboard's variables.
var variables = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__range", "1m",
	"$plugin", ".+",
)

type dashboard struct {
	Panels []panel `json:"panels"`
}

type panel struct {
	Title   string   `json:"title"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"`
}

type target struct {
	Expr  string `json:"expr"`
	RefID string `json:"refId"`
}

// TestDashboardQueries reads the dashboard from $DASHBOARD and the two scrapes (OpenMetrics
// text) from $SCRAPES, comma-separated.
func TestDashboardQueries(t *testing.T) {
	path := os.Getenv("DASHBOARD")
	scrapes := strings.Split(os.Getenv("SCRAPES"), ",")
	if path == "" || len(scrapes) != 2 {
		t.Fatalf("set DASHBOARD to the dashboard JSON and SCRAPES to two scrape files, comma-separated")
	}
	storage := promqltest.LoadedStorage(t, loadCommand(t, scrapes))
	t.Cleanup(func() { storage.Close() })
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	at := time.Unix(0, 0).Add(scrapeInterval)
	queries := 0
	for _, p := range panels(t, path) {
		for _, target := range p.Targets {
			queries++
			expr := variables.Replace(target.Expr)
			series, err := evaluate(engine, storage, expr, at)
			switch {
			case err != nil:
				t.Errorf("panel %q, query %s: %s: %v", p.Title, target.RefID, expr, err)
			case series == 0:
				t.Errorf("panel %q, query %s returned no series: %s", p.Title, target.RefID, expr)
			}
		}
	}
	if queries == 0 {
		t.Fatalf("%s has no queries", path)
	}
	if !t.Failed() {
		t.Logf("%d queries of %s each returned series", queries, path)
	}
}

// panels reads every panel of the dashboard at path, those in collapsed rows included.
func panels(t *testing.T, path string) []panel {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(text, &d); err != nil {
		t.Fatalf("%s is not a dashboard: %v", path, err)
	}
	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return all
}

func evaluate(engine *promql.Engine, storage storage.Queryable, expr string, at time.Time) (int, error) {
	query, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, at)
	if err != nil {
		return 0, err
	}
	defer query.Close()
	result := query.Exec(context.Background())
	if result.Err != nil {
		return 0, result.Err
	}
	switch value := result.Value.(type) {
	case promql.Vector:
		return len(value), nil
	case promql.Matrix:
		return len(value), nil
	case promql.Scalar:
		return 1, nil
	default:
		return 0, fmt.Errorf("unexpected result type %T", value)
	}
}

// loadCommand turns the scrapes into a promqltest `load` command: each series with its value
// in each scrape, `_` where a scrape lacks it.
func loadCommand(t *testing.T, scrapes []string) string {
	values := map[string][]string{}
	for i, path := range scrapes {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for series, value := range parse(t, path, text) {
			if values[series] == nil {
				values[series] = make([]string, len(scrapes))
			}
			values[series][i] = value
		}
	}
	names := make([]string, 0, len(values))
	for series := range values {
		names = append(names, series)
	}
	sort.Strings(names)
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", scrapeInterval)
	for _, series := range names {
		samples := values[series]
		for i := range samples {
			if samples[i] == "" {
				samples[i] = "_"
			}
		}
		fmt.Fprintf(&load, "  %s %s\n", series, strings.Join(samples, " "))
	}
	return load.String()
}

// parse reads one OpenMetrics scrape: series notation to value.
func parse(t *testing.T, path string, text []byte) map[string]string {
	parser, err := textparse.New(text, "application/openmetrics-text", labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	series := map[string]string{}
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not OpenMetrics text: %v", path, err)
		}
		if entry != textparse.EntrySeries {
			continue
		}
		var lset labels.Labels
		parser.Labels(&lset)
		_, _, value := parser.Series()
		series[notation(lset)] = strconv.FormatFloat(value, 'g', -1, 64)
	}
	if len(series) == 0 {
		t.Fatalf("%s holds no series", path)
	}
	return series
}

// notation writes lset as promqltest's series notation: name{label="value", ...}.
func notation(lset labels.Labels) string {
	var pairs []string
	lset.Range(func(l labels.Label) {
		if l.Name != labels.MetricName {
			pairs = append(pairs, l.Name+"="+strconv.Quote(l.Value))
		}
	})
	return lset.Get(labels.MetricName) + "{" + strings.Join(pairs, ", ") + "}"
}
