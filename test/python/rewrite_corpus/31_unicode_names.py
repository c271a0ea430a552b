for lot, cible in données:
    optimiseur.zero_grad()
    sortie = modèle(lot)  # é à ü
    perte = critère(sortie, cible)
    perte.backward()
    optimiseur.step()
