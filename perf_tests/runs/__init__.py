"""How a run happens: the protocol of independent runs, the launchers that start each run's
workers, their processes, the rendezvous network, the device lock, stop signals and the host
probe."""
