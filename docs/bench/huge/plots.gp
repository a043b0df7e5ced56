set terminal pngcairo size 900,500 font 'sans,10'
set grid
set key outside right
set output 'cold_start.png'
set title 'Cold ring: received throughput, 1 ms bins (region non-resident at t=0)'
set xlabel 'ms since traffic start'
set ylabel 'kpps'
set xrange [0:*]
plot 'cold_npf.dat' using 1:2 with lines lw 2 title 'npf', 'cold_npf-2m.dat' using 1:2 with lines lw 2 title 'npf-2m', 'cold_drop-on-fault.dat' using 1:2 with lines lw 2 title 'drop-on-fault', 'cold_static-pinned.dat' using 1:2 with lines lw 2 title 'static-pinned'
set output 'cold_start_zoom.png'
set title 'Cold ring, first 100 ms'
set xrange [0:100]
plot 'cold_npf.dat' using 1:2 with lines lw 2 title 'npf', 'cold_npf-2m.dat' using 1:2 with lines lw 2 title 'npf-2m', 'cold_drop-on-fault.dat' using 1:2 with lines lw 2 title 'drop-on-fault', 'cold_static-pinned.dat' using 1:2 with lines lw 2 title 'static-pinned'
set xrange [*:*]
set output 'pressure.png'
set title 'Memory pressure: received throughput, 10 ms averages (budget 1/4 of the working set)'
set xlabel 'ms since traffic start'
set ylabel 'kpps'
set xrange [0:*]
plot 'pressure_npf.dat' using (floor($1/10)*10):2 smooth unique with lines lw 2 title 'npf', 'pressure_npf-2m.dat' using (floor($1/10)*10):2 smooth unique with lines lw 2 title 'npf-2m', 'pressure_drop-on-fault.dat' using (floor($1/10)*10):2 smooth unique with lines lw 2 title 'drop-on-fault', 'pressure_static-pinned.dat' using (floor($1/10)*10):2 smooth unique with lines lw 2 title 'static-pinned'
set output 'latency_cdf_cold.png'
set title 'One-way latency, generator to application (cold)'
set xlabel 'latency (us, log)'
set ylabel 'fraction of datagrams'
set logscale x
set yrange [0:1]
plot 'cdf_cold_npf.dat' using 1:2 with lines lw 2 title 'npf', 'cdf_cold_npf-2m.dat' using 1:2 with lines lw 2 title 'npf-2m', 'cdf_cold_drop-on-fault.dat' using 1:2 with lines lw 2 title 'drop-on-fault', 'cdf_cold_static-pinned.dat' using 1:2 with lines lw 2 title 'static-pinned'
unset logscale x
set yrange [*:*]
