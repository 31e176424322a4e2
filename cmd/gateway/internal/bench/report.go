package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people: every pass of every repeat,
// then the ratios with their spread over the repeats, then the targets.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "gateway bench: store=%s mode=%s provider=%s requests=%d concurrency=%d duplicates=%.0f%% body=%dB slice=%d sign_forward=%t log=%s\n",
		r.Store, r.Mode, r.Provider, r.Requests, r.Concurrency, r.Duplicates*100, r.BodySize, r.Slice, r.SignForward, r.Log)
	fmt.Fprintf(w, "machine: GOMAXPROCS=%d NumCPU=%d %s; generator, sink and middle box share this process and its CPUs\n", r.GOMAXPROCS, r.NumCPU, r.GoVersion)
	if !r.CPUMeasured {
		fmt.Fprintln(w, "cpu: not measured, this platform reports no process CPU time; the cpu figures read -")
	}
	if r.StoreNotes != "" {
		fmt.Fprintf(w, "store: %s\n", r.StoreNotes)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "repeat\tpass\toffered/s\treq/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\tcpu µs/req\tnet cpu µs/req\tunique\tredeliv\tdup answers\terrors\tfwd/unique\t")
	for i, rr := range r.Repeats {
		for _, p := range []*Pass{&rr.Direct, &rr.Baseline, &rr.Gateway, rr.BaselineHalf, rr.GatewayHalf} {
			if p == nil {
				continue
			}
			offered, net := "max", "-"
			if p.Offered > 0 {
				offered = fmt.Sprintf("%.0f", p.Offered)
			}
			if p.Name != "direct" && p.Offered == 0 {
				net = cpuCell(r.CPUMeasured, "%.1f", p.NetCPUus)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%s\t%s\t%d\t%d\t%d\t%d\t%.3f\t\n",
				i+1, p.Name, offered, p.Throughput, p.P50ms, p.P95ms, p.P99ms, p.MaxMs, cpuCell(r.CPUMeasured, "%.1f", p.CPUus), net,
				p.Unique, p.Redeliveries, p.Duplicate, p.Errors, p.ForwardsPerUnique)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeStoreTiming(w); err != nil {
		return err
	}
	for i, rr := range r.Repeats {
		for _, p := range []*Pass{&rr.Gateway, rr.GatewayHalf} {
			if p != nil && p.DeliveredRate > 0 {
				fmt.Fprintf(w, "repeat %d %s: accepted %.0f req/s; every unique event delivered %.2f s after the last answer; delivered >= %.0f events/s over the whole pass\n",
					i+1, p.Name, p.Throughput, p.DrainSeconds, p.DeliveredRate)
				if p.SteadyAccepted > 0 {
					fmt.Fprintf(w, "repeat %d %s: steady state, during its own slices: %.0f new events/s accepted, %.0f events/s delivered (%.2f× accepted), %d left undelivered when sending ended\n",
						i+1, p.Name, p.SteadyAccepted, p.SteadyDelivered, p.SteadyDelivered/p.SteadyAccepted, p.Backlog)
				}
			}
		}
	}
	fmt.Fprintln(w)
	for i, rr := range r.Repeats {
		fmt.Fprintf(w, "repeat %d: throughput ratio %.2f× (slice pairs %.2f× [%.2f× – %.2f×]), cpu ratio %s, p99 ratio %.2f×, p99 added %+.2f ms",
			i+1, rr.ThroughputRatio, rr.SliceRatios.Median, rr.SliceRatios.Min, rr.SliceRatios.Max, cpuCell(r.CPUMeasured, "%.2f×", rr.CPURatio), rr.P99Ratio, rr.AddedP99ms)
		if rr.AddedP99HalfMs != nil {
			fmt.Fprintf(w, ", at half load (%.0f req/s) %+.2f ms", rr.GatewayHalf.Offered, *rr.AddedP99HalfMs)
		}
		fmt.Fprintln(w)
	}
	s := r.Summary
	fmt.Fprintf(w, "\ngateway / baseline over %d repeat(s), median [min – max]:\n", len(r.Repeats))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, sp Spread, format string) {
		fmt.Fprintf(tw, "  %s\t"+format+"\t["+format+" – "+format+"]\n", name, sp.Median, sp.Min, sp.Max)
	}
	cpuRow := func(name string, sp Spread, format string) {
		if !r.CPUMeasured {
			fmt.Fprintf(tw, "  %s\t-\n", name)
			return
		}
		row(name, sp, format)
	}
	row("throughput ratio", s.ThroughputRatio, "%.2f×")
	cpuRow("cpu ratio (baseline/gateway cpu per request)", s.CPURatio, "%.2f×")
	row("p99 ratio", s.P99Ratio, "%.2f×")
	row("p99 added at full speed", s.AddedP99ms, "%+.2f ms")
	if s.AddedP99HalfMs != nil {
		row("p99 added at half load", *s.AddedP99HalfMs, "%+.2f ms")
	}
	row("gateway req/s", s.GatewayThroughput, "%.0f")
	row("baseline req/s", s.BaselineThroughput, "%.0f")
	cpuRow("gateway net cpu µs/req", s.GatewayNetCPUus, "%.1f")
	cpuRow("baseline net cpu µs/req", s.BaselineNetCPUus, "%.1f")
	if s.GatewayServerCPUus != nil {
		row("store server cpu µs/req (gateway)", *s.GatewayServerCPUus, "%.1f")
	}
	fmt.Fprintf(tw, "  gateway forwards per unique event\t%.2f\n", s.ForwardsPerUnique)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ntargets:")
	for _, t := range s.Targets {
		verdict := "NOT MET"
		if t.Met {
			verdict = "met"
		}
		fmt.Fprintf(w, "  %-40s goal %-9s got %7.2f  %s\n", t.What, t.Goal, t.Value, verdict)
	}
	return nil
}

// writeStoreTiming writes, under the pass table, how long the gateway passes
// waited on the store: per call, and per request summed over its calls.
func (r *Report) writeStoreTiming(w io.Writer) error {
	var rows []string
	for i, rr := range r.Repeats {
		for _, p := range []*Pass{&rr.Gateway, rr.GatewayHalf} {
			if p == nil || p.Store == nil {
				continue
			}
			s := p.Store
			srv := "-"
			if s.ServerCPUus != nil {
				srv = fmt.Sprintf("%.1f", *s.ServerCPUus)
			}
			rows = append(rows, fmt.Sprintf("%d\t%s\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n",
				i+1, p.Name, s.CallsPerReq, s.CallP50ms, s.CallP99ms, s.ReqP50ms, s.ReqP99ms, srv))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\ntime inside the store's Transact and Read (gateway passes):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "repeat\tpass\tstore calls/req\tcall p50 ms\tcall p99 ms\tstore ms/req p50\tstore ms/req p99\tserver cpu µs/req\t")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	return tw.Flush()
}

// cpuCell formats a CPU figure, or "-" where CPU time was not measured.
func cpuCell(measured bool, format string, v float64) string {
	if !measured {
		return "-"
	}
	return fmt.Sprintf(format, v)
}
