set terminal pngcairo size 960,600 noenhanced
set output 'experiments/results/pair_selection/2026-12-02-validation-fit/S3/base/figure2.png'
set title 'Informed pair selection, MNIST (1 % budget): test accuracy, mean over folds, band = +-1 sd'
set xlabel 'training epochs'
set ylabel 'classification accuracy (%)'
set grid
set key outside below horizontal
set xrange [0:*]
set style fill transparent solid 0.15 noborder
plot 'experiments/results/pair_selection/2026-12-02-validation-fit/S3/base/figure2.png.dat' index 0 using 1:($2-$3):($2+$3) with filledcurves lc 1 notitle, 'experiments/results/pair_selection/2026-12-02-validation-fit/S3/base/figure2.png.dat' index 0 using 1:2 with linespoints lc 1 dt 1 title 'BASE'
