"""Graph featurization (`features`) and the graph_nets encoder (`encoder`)."""
