for run in range(2):
    torch.manual_seed(run)
    for epoch in range(3):
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            out = net(x)
            loss = crit(out, y)
            loss.backward()
            opt.step()
        print(f"run {run} epoch {epoch}: {loss.item():.4f}")
