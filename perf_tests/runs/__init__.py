"""How a run happens: the one run loop every mode and tool measures with (protocol), what one run
left (outcome), what launching takes (launch) and the four launchers (launchers), process trees
(processes), node addresses (network), the variables that shape a run (variables), the device
lock, stop signals, an installed suite's code inside an image (suite_code) and the host probe
(host). It may import core and containers."""
