for epoch in range(2):
	for x, y in loader:
		opt.zero_grad()
		out = net(x)  # forward
		loss = crit(out, y)
		loss.backward()
		opt.step()
	print(epoch)
