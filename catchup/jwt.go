package catchup

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// appJWT is the JWT a GitHub App authenticates as itself with: RS256,
// signed with its private key, issued by its id, issued a minute in the
// past (GitHub's advice against clock drift) and expiring 9 minutes
// ahead (GitHub refuses more than 10). The key is read at each round;
// errors name the file, never its content.
func appJWT(appID int64, keyFile string, now time.Time) (string, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return "", fmt.Errorf("catch_up.private_key_file: %w", err)
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		return "", fmt.Errorf("catch_up.private_key_file: %w", err)
	}
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(appID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
}
