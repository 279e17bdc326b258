"""What the panes draw and say, as arithmetic: the timeline's lanes and cells, the traffic view's lanes, the
selected lane's figures, the diagnosis."""
