package placement

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeySecret is the Secret, in the controller's namespace, of the managers'
// key (its data "key"): the first manager makes it, the others read it.
// Tenants cannot read it, so they cannot sign a Pod.
const KeySecret = "afe-placement-key"

// keyData is the Secret's data key.
const keyData = "key"

// LoadKey reads the managers' key from the Secret KeySecret of the
// namespace, and makes the Secret, with a random key, when there is none.
func LoadKey(ctx context.Context, c client.Client, namespace string) (Key, error) {
	name := types.NamespacedName{Namespace: namespace, Name: KeySecret}
	for range 2 {
		secret := &corev1.Secret{}
		err := c.Get(ctx, name, secret)
		if err == nil {
			if k := secret.Data[keyData]; len(k) >= KeySize {
				return Key(k), nil
			}
			return nil, fmt.Errorf("secret %s: its %q is shorter than %d bytes", name, keyData, KeySize)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read secret %s: %w", name, err)
		}
		k := make([]byte, KeySize)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Namespace: namespace},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{keyData: k},
		}
		err = c.Create(ctx, secret)
		if err == nil {
			return Key(k), nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("make secret %s: %w", name, err)
		}
		// Another manager made it first: read it.
	}
	return nil, fmt.Errorf("secret %s was made, then gone", name)
}
