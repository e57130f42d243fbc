"""`agentwatch web`: the dashboard served to browsers, one dashboard process per tab, signed in."""
